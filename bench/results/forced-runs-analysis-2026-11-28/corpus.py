exec(open('/tmp/fr/analyze.py').read().split('WS="[ ]?"')[0])
import json, re
d=json.load(open('/work/main/bench/results/constraint-corpus-h200-2026-11-28-9f50d0c/cb-smollm2.json'))
tot=0; acc=0; n=0; runs=0
for s in d['schemas']:
    for g in s['generations']:
        if g['seed'] is not None or g['stopReason']!='end-of-generation': continue
        text=g['text']
        try: v=json.loads(text)
        except Exception: continue
        keys=re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', text)
        k=sum(len(tokenize(x)) for x in keys)
        tot+=g['tokens']+1; acc+=k; n+=1; runs+=len(keys)
print(f'{n} greedy answers, steps {tot}, key-name tokens {acc} ({acc/tot:.1%}), keys {runs}, passes if every key accepted {tot-acc} -> {tot/(tot-acc):.3f}x fewer steps')
