"""A Gemma 4 audio projector (llama.cpp's `gemma4a` USM Conformer encoder) at an estimate of E4B's encoder
shapes (12 Conformer blocks of width 1024, 8 heads, FFN 4096, 128 mel bins: about 300 M parameters, which is
what the 991 MB BF16 projector leaves after its vision encoder), so a CUDA llama-server allocates the
projector's compute buffer without the download. The shapes are an estimate; the real file decides.
Usage: python audio_projector_gguf.py OUT.gguf (run from the repository root; needs gguf-py and numpy)."""

from __future__ import annotations

import sys
from pathlib import Path

from olarespack.smoke import tiny_gguf  # smoke's (and the tests') generator of the same architecture, at full size

if __name__ == "__main__":
    tiny_gguf.write_gemma4_audio_projector(Path(sys.argv[1]), n_embd_text=2560, n_embd=1024, n_head=8, n_ff=4096,
                                           n_layer=12, n_mel=128, channels=32)
