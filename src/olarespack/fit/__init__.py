"""Will it fit? vLLM's and llama.cpp's KV-cache arithmetic (pure), the fit report, and the build's
context checks."""
