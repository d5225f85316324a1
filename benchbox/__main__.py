"""``python -m benchbox`` and the ``benchbox`` command.

The command line loads numpy and click before it can handle a Ctrl-C; one that arrives while
it loads ends in one line and exit 130, as one during a command does, never a traceback.
"""

import sys


def entry() -> None:
    try:
        from benchbox.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("benchbox: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    entry()
