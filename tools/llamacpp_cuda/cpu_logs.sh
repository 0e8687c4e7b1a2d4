#!/usr/bin/env bash
# The CPU boot logs in tests/fixtures/llama-logs/: the tiny Gemma 4 (src/olarespack/smoke/tiny_gguf.py) booted by the CPU
# llama-servers `make test` builds, with the audio chart's arguments, at default verbosity and with -v, stopped
# with SIGINT after one request (llama.cpp prints its memory breakdown as it exits).
#   bash tools/llamacpp_cuda/cpu_logs.sh SERVER BUILD   e.g. ~/.cache/olarespack-engine-releases/servers/b9101-*/bin/llama-server 9101
set -eu
server=$1 build=$2 out=tests/fixtures/llama-logs port=${PORT:-18611}
model=$(mktemp -d)/tiny-gemma4.gguf
.venv/bin/python -c "from olarespack.engines.llamacpp import tiny_gguf; import pathlib; tiny_gguf.write_gemma4(pathlib.Path('$model'))"
for verbosity in default v; do
  extra=(); [ $verbosity = v ] && extra=(-v)
  log=$out/b$build-cpu-$verbosity.log
  "$server" -m "$model" --host 127.0.0.1 --port $port --ctx-size 32768 --threads 1 --batch-size 512 \
    --ubatch-size 512 --parallel 1 --flash-attn on --jinja --no-context-shift "${extra[@]}" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 240); do grep -q "server is listening" "$log" && break; sleep 0.5; done
  .venv/bin/python -c "import json, urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:$port/completion',
    data=json.dumps({'prompt': 'a b c', 'n_predict': 4, 'seed': 1}).encode(), headers={'Connection': 'close'}),
    timeout=120).read()"
  kill -INT $pid; wait $pid || true
  # the machine's paths and times are no part of what is read
  sed -i -e "s#$model#/models/tiny-gemma4.gguf#g" "$log"
done
