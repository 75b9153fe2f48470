# Sourced by the bench/*-gpu.sh scripts that run the npm package through Dawn in Node: unpacks
# the carried .bench-carry/dawn (node.xz, and dawn-linux-x64.tar.xz: the `webgpu` package's
# index.js, package.json and dist/linux-x64) into $D; then $D/node and $D/package.
D=/root/dawn; mkdir -p $D; xz -dc .bench-carry/dawn/node.xz > $D/node; chmod +x $D/node
tar xJf .bench-carry/dawn/dawn-linux-x64.tar.xz -C $D
