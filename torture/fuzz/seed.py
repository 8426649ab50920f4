#!/usr/bin/env python3
"""seed.py VECTORS CORPUS: seeds the protocol fuzzer from the golden vectors.

Each input starts with a control byte (see ProtocolFuzz.swift: low 5 bits + 1 = read size,
bit 7 = 1 MiB body limit instead of 256 bytes), then whole frames."""
import os, sys

vectors, corpus = sys.argv[1], sys.argv[2]
os.makedirs(corpus, exist_ok=True)
frames = []
for name in sorted(os.listdir(vectors)):
    if not name.endswith(".bin"):
        continue
    data = open(os.path.join(vectors, name), "rb").read()
    frames.append(data)
    stem = name[:-4]
    open(os.path.join(corpus, "seed-" + stem), "wb").write(b"\x9f" + data)          # 32-byte reads
    open(os.path.join(corpus, "seed-" + stem + "-split"), "wb").write(b"\x82" + data)  # 3-byte reads
    open(os.path.join(corpus, "seed-" + stem + "-small"), "wb").write(b"\x1f" + data)  # 256-byte body limit
open(os.path.join(corpus, "seed-all"), "wb").write(b"\x9f" + b"".join(frames))
