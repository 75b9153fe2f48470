exec(open('/tmp/fr/analyze.py').read().split('texts=[')[0])
import json
P=regex.compile(person.encode())
alive=lambda b: P.fullmatch(b, partial=True) is not None
acc=lambda b: P.fullmatch(b) is not None
def forced(pre):
    F=b''
    while not acc(pre+F):
        live=[b for b in range(256) if alive(pre+F+bytes([b]))]
        if len(live)!=1: break
        F+=bytes(live)
    return F
by_first={}
for i,t in enumerate(vocab):
    if t: by_first.setdefault(t[0],[]).append(i)
def extendable(pre, t):  # an allowed token longer than t starting with t's bytes
    tb=vocab[t]
    return any(len(vocab[j])>len(tb) and vocab[j].startswith(tb) and alive(pre+vocab[j]) for j in by_first[tb[0]])
def canon(bs):
    return tokenize(bs.decode())
d=json.load(open('/work/main/bench/results/constraint-corpus-h200-2026-11-28-9f50d0c/cb-smollm2.json'))
for g in d['schemas'][0]['generations']:
    text=g['text']; ids=tokenize(text)+[2]  # + EOS step
    tb=text.encode()
    # C: speculative with draft = canon(F) [strict: drop extendable last]
    for strict in (False,True):
        i=0; pre=b''; passes=0; accepted=0; drafted=0
        while i<len(ids):
            F=forced(pre)
            draft=canon(F) if F else []
            if strict and draft:
                # drop trailing tokens that could be extended by an allowed longer token
                p2=pre+b''.join(vocab[t] for t in draft[:-1])
                if extendable(p2, draft[-1]): draft=draft[:-1]
            a=0
            while a<len(draft) and i+a<len(ids) and ids[i+a]==draft[a]: a+=1
            drafted+=len(draft); accepted+=a
            n=min(a+1, len(ids)-i)
            for t in ids[i:i+n]: pre+=vocab[t] if t!=2 else b''
            i+=n; passes+=1
        print(('strict ' if strict else 'canon  ')+f'tokens {len(ids)} passes {passes} drafted {drafted} accepted {accepted}', repr(text[:40]))
    # B: jump-forward: bytes forced counted; free tokens = canonical tokens of free segments
    pre=b''; k=0; free_bytes=b''; segs=[]; forced_tok=0; cur=b''
    while k<len(tb):
        F=forced(tb[:k])
        if F:
            assert tb[k:k+len(F)]==F
            if cur: segs.append(cur); cur=b''
            forced_tok+=len(canon(F)); k+=len(F)
        else:
            cur+=tb[k:k+1]; k+=1
    if cur: segs.append(cur)
    free=sum(len(canon(s)) for s in segs)+1
    print(f'  jump-forward: forced bytes {sum(1 for _ in range(0))}, forced canon tokens {forced_tok}, free tokens (passes) {free}, output tokens {forced_tok+free}')

print('--- forced + grammar-checked n-gram continuation (D=4)')
def ngram_next(hist, D):
    # continuation after the latest earlier occurrence of hist[-2:] (else hist[-1:])
    for n in (2,1):
        if len(hist)<=n: continue
        key=hist[-n:]
        for j in range(len(hist)-n-1,-1,-1):
            if hist[j:j+n]==key:
                return hist[j+n:j+n+D]
    return []
for g in d['schemas'][0]['generations']:
    text=g['text']; ids=tokenize(text)+[2]
    for D in (4,8):
        i=0; pre=b''; passes=0; acc_total=0; rows=0
        while i<len(ids):
            hist=ids[:i]
            F=forced(pre)
            draft=canon(F) if F else []
            if draft:
                p2=pre+b''.join(vocab[t] for t in draft[:-1])
                if extendable(p2, draft[-1]): draft=draft[:-1]
            draft=draft[:D]
            # extend with n-gram, grammar-checked
            while len(draft)<D:
                nx=ngram_next(hist+draft, D-len(draft))
                ok=[]; p3=pre+b''.join(vocab[t] for t in draft)
                for t in nx:
                    if t==2 or not alive(p3+vocab[t]): break
                    ok.append(t); p3+=vocab[t]
                if not ok: break
                draft+=ok
            a=0
            while a<len(draft) and i+a<len(ids) and ids[i+a]==draft[a]: a+=1
            n=min(a+1,len(ids)-i); rows+=1+len(draft)
            for t in ids[i:i+n]: pre+=vocab[t] if t!=2 else b''
            i+=n; passes+=1; acc_total+=a
        print(f'D={D} tokens {len(ids)} passes {passes} accepted {acc_total} mean rows/pass {rows/passes:.2f}', repr(text[:30]))
