from benchbox.cli import main

main()
