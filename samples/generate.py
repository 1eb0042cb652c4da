"""generate.py — the powerinfer Python binding in a dozen lines: stream a completion.

    pip install ./bindings/python
    python samples/generate.py MODEL.gguf ["prompt"]
"""
import sys

import powerinfer

path, prompt = sys.argv[1], " ".join(sys.argv[2:]) or "Once upon a time"
with powerinfer.Model(path) as model, model.create_context(n_ctx=1024) as ctx:
    print(prompt, end="", flush=True)
    try:
        for piece in ctx.stream(prompt, max_tokens=64):
            print(piece, end="", flush=True)
    except KeyboardInterrupt:  # Ctrl-C has cancelled the generation
        print(" [cancelled]", end="")
    print()
    if r := ctx.last_result:
        stats = f"{r.n_generated_tokens} tokens, {r.decode_seconds:.2f} s, {r.stop_reason}"
        print(stats, file=sys.stderr)
