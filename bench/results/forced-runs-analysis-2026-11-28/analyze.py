import struct, json, sys, regex
sys.path.insert(0,'/tmp/fr')
vocab=[bytes.fromhex(h) if h is not None else None for h in json.load(open('/tmp/fr/smollm2_vocab.json'))]
# merges
exec(open('/tmp/fr/vocab.py').read().split('kv=read_vocab')[0])
kv=read_vocab('/work/main/models/SmolLM2-135M-Instruct.Q4_1.gguf')
merges=[m.decode() for m in kv['tokenizer.ggml.merges']]
rank={tuple(m.split(' ')):i for i,m in enumerate(merges)}
toks=[t.decode() for t in kv['tokenizer.ggml.tokens']]
tid={t:i for i,t in enumerate(toks)}
bs=list(range(ord("!"),ord("~")+1))+list(range(ord("¡"),ord("¬")+1))+list(range(ord("®"),ord("ÿ")+1))
cs=bs[:]; n=0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256+n); n+=1
enc={b:chr(c) for b,c in zip(bs,cs)}
GPT2=regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
def bpe(word):
    parts=[enc[b] for b in word.encode()]
    while len(parts)>1:
        best=min(((rank.get((parts[i],parts[i+1]),1e18),i) for i in range(len(parts)-1)))
        if best[0]==1e18: break
        i=best[1]; parts=parts[:i]+[parts[i]+parts[i+1]]+parts[i+2:]
    return [tid[p] for p in parts]
def tokenize(text):
    out=[]
    for piece in regex.findall(r"\p{N}|[^\p{N}]+", text):
        if regex.fullmatch(r"\p{N}",piece): out+=bpe(piece); continue
        for w in GPT2.findall(piece): out+=bpe(w)
    return out
WS="[ ]?"
SC=r'(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
EMAIL=r"[A-Za-z0-9_%+-]{1,32}(?:\.[A-Za-z0-9_%+-]{1,32}){0,3}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?\.){1,4}[A-Za-z]{2,24}"
INT="(?:[0-9]|[1-9][0-9]|1[0-2][0-9]|130)"
person = r'\{'+WS+r'"name"'+WS+':'+WS+'"'+SC+'{0,20}"'+WS+','+WS+r'"age"'+WS+':'+WS+INT+'(?:'+WS+','+WS+r'"email"'+WS+':'+WS+'"'+EMAIL+'")?'+WS+r'\}'
NOWS=person.replace(WS,'')
import functools
def analyze(pat, text, label):
    P=regex.compile(pat.encode())
    alive=lambda b: P.fullmatch(b, partial=True) is not None
    ids=tokenize(text)
    assert b''.join(vocab[i] for i in ids)==text.encode(), (ids,)
    # candidate tokens: prefilter by first byte
    by_first={}
    for i,t in enumerate(vocab):
        if t: by_first.setdefault(t[0],[]).append(i)
    pre=b''; forced_tok=0; rows=[]
    for i in ids:
        nxt=[b for b in range(256) if alive(pre+bytes([b]))]
        allowed=[j for b in nxt for j in by_first.get(b,[]) if alive(pre+vocab[j])]
        acc = P.fullmatch(pre) is not None
        n_allowed=len(allowed)+(1 if acc else 0)
        forced_tok+= n_allowed==1
        rows.append((vocab[i].decode(errors='replace'), n_allowed, len(nxt)))
        pre+=vocab[i]
    # byte-level forced bytes along the text
    tb=text.encode(); fb=0
    for k in range(len(tb)):
        p=tb[:k]
        if P.fullmatch(p) is None and sum(alive(p+bytes([b])) for b in range(256))==1: fb+=1
    print(label, repr(text)); print('  tokens',len(ids),'token-forced',forced_tok,'bytes',len(tb),'byte-forced',fb)
    print('  ', ' '.join(f'{t!r}:{n}/{nb}' for t,n,nb in rows))
texts=['{"name": "John Doe", "age": 30, "email": "john.doe@example.com"}',
       '{ "name": "John Doe", "age": 30 }']
for t in texts: analyze(person,t,'WS [ ]?')
for t in ['{"name":"John Doe","age":30,"email":"john.doe@example.com"}']: analyze(NOWS,t,'no WS')
