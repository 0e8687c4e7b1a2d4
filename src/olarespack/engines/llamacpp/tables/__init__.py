"""llama.cpp's release tables made from its own artifacts (`olarespack releases refresh --engine llamacpp`): the
sdists fetched (sources.py), common/arg.cpp read without compiling it (argcpp.py) into the option surface a table
holds (surface.py). Maintainer tooling: nothing a chart's build or lint runs imports it, so the runtime part of the
engine package stays what a chart needs."""
