import numpy as np, time, sys
from benchbox import stats
rng=np.random.default_rng(3)
def gen(K,n,drift,eff=1.0,sig=0.1):
    return [np.exp(rng.normal(0,drift)+rng.normal(0,sig,n//K))*1e6*eff for _ in range(K)]
t=time.time(); N=int(sys.argv[1])
for eff in (1.0,1.1):
    sl=0
    for i in range(N):
        r=stats.rounds_ratio(gen(5,400,0.05),gen(5,400,0.05,eff),0.5,n_resamples=1000,seed=i)
        sl+= r[2]<0.05 and r[0]>1.05
    print(eff, sl/N, time.time()-t)
