"""vLLM's release tables made from its own artifacts (`olarespack releases refresh --engine vllm`): the wheel
fetched and cached (wheels.py), its Python read without running it (pysource.py, args_source.py) into the option
surface a table holds (surface.py). Maintainer tooling: nothing a chart's build or lint runs imports it, so the
runtime part of the engine package stays what a chart needs."""
