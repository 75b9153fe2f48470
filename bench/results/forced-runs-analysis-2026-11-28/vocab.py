import struct, json, sys
def read_vocab(path):
    f = open(path,'rb')
    def u32(): return struct.unpack('<I', f.read(4))[0]
    def u64(): return struct.unpack('<Q', f.read(8))[0]
    def s(): n=u64(); return f.read(n)
    assert f.read(4)==b'GGUF'; ver=u32(); nt=u64(); nkv=u64()
    sizes={0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}
    out={}
    def val(t):
        if t==8: return s()
        if t==9:
            et=u32(); n=u64()
            if et==8: return [s() for _ in range(n)]
            return [val(et) for _ in range(n)] if et not in sizes else (f.read(sizes[et]*n), et, n)
        b=f.read(sizes[t])
        fmt={0:'<B',1:'<b',2:'<H',3:'<h',4:'<I',5:'<i',6:'<f',7:'<?',10:'<Q',11:'<q',12:'<d'}[t]
        return struct.unpack(fmt,b)[0]
    for _ in range(nkv):
        k=s().decode(); t=u32(); v=val(t)
        out[k]=v
    return out
kv=read_vocab(sys.argv[1])
toks=kv['tokenizer.ggml.tokens']
print(kv.get('tokenizer.ggml.model'), len(toks), {k:v for k,v in kv.items() if 'token_id' in k})
# byte-level decode
bs=list(range(ord("!"),ord("~")+1))+list(range(ord("¡"),ord("¬")+1))+list(range(ord("®"),ord("ÿ")+1))
cs=bs[:]; n=0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256+n); n+=1
dec={chr(c):b for b,c in zip(bs,cs)}
tt=kv.get('tokenizer.ggml.token_type')
types = list(struct.unpack('<%di'%tt[2], tt[0])) if isinstance(tt,tuple) else None
res=[]
for i,t in enumerate(toks):
    st=t.decode('utf-8')
    if types and types[i]!=1: res.append(None); continue
    try: res.append(bytes(dec[c] for c in st).hex())
    except KeyError: res.append(None)
json.dump(res, open('/tmp/fr/smollm2_vocab.json','w'))
print(sum(r is not None for r in res))
