#!/bin/sh
# The model downloader of olarespack's llama.cpp charts: the init container runs it (`sh <this file>`) to put
# the model's files where llama-server reads them, since llama-server cannot fetch from Olares' Hugging Face
# mirror itself. The chart carries it verbatim (files/download-models.sh, a ConfigMap through .Files): Helm
# never renders it, and the same script serves every app. What differs per app comes in the environment:
#   MODEL_REPO, MODEL_REVISION  the model's repository (owner/name) and its branch, tag or commit
#   MODEL_FILES    one "<path in the repository> <local destination>" pair a line, followed by
#                  "<owner/name> <revision>" for a file of another repository (a drafter)
#   HF_ENDPOINT    the Hugging Face endpoint (Olares' mirror, or Hugging Face itself)
#   HF_TOKEN_PATH  the token's file (from the chart's Secret); absent or unreadable: no token
# Needs sh, curl, sed, awk, tr, mktemp, dd, wc: no package is installed at start.
#
# A file in place is left alone; otherwise <destination>.part is continued (HTTP Range) and renamed when
# complete. The token goes to the origin of HF_ENDPOINT only: the endpoint is asked with the token and
# without following redirects; a redirect to another origin (Hugging Face sends downloads to its CDN) is
# followed without the token. Only http and https are ever followed.
set -eu
fail() { echo "model-downloader: $*" >&2; exit 1; }
command -v curl >/dev/null 2>&1 || fail "no curl in this image: leave engine.downloader_image unset (the engine image has curl)"
need() { [ -n "$2" ] || fail "$1 is unset or empty: the chart's init container sets it"; }
need MODEL_REPO "${MODEL_REPO:-}"
need MODEL_REVISION "${MODEL_REVISION:-}"
need MODEL_FILES "${MODEL_FILES:-}"
need HF_ENDPOINT "${HF_ENDPOINT:-}"
base="${HF_ENDPOINT%/}"
case "$base" in
  http://?*|https://?*) ;;
  *) fail "HF_ENDPOINT is not an http(s) URL: $base" ;;
esac
check_repo() {
  case "$1" in
    */*/*|/*|*/|../*|*/..|*[!A-Za-z0-9._/-]*) fail "not an owner/name repository: $1" ;;
    ?*/?*) ;;
    *) fail "not an owner/name repository: $1" ;;
  esac
}
check_revision() {
  case "$1" in
    ''|.|..|*[!A-Za-z0-9._-]*) fail "not a branch, tag or commit: $1" ;;
  esac
}
check_repo "$MODEL_REPO"
check_revision "$MODEL_REVISION"
token=""  # the Secret's file, without the trailing newline it may carry
if [ -n "${HF_TOKEN_PATH:-}" ] && [ -r "$HF_TOKEN_PATH" ]; then token=$(cat "$HF_TOKEN_PATH"); fi
case "$token" in
  *[!A-Za-z0-9._~+/=-]*) fail "the Hugging Face token has characters a bearer token cannot have" ;;
esac
origin() { printf '%s\n' "$1" | sed 's|^\([A-Za-z][A-Za-z0-9+.-]*://[^#/?]*\).*$|\1|' | tr '[:upper:]' '[:lower:]'; }
home=$(origin "$base")
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT
web() {
  curl --disable --silent --show-error --globoff --proto =http,https --connect-timeout 30 \
    --retry 3 --retry-delay 5 --dump-header "$headers" "$@"
}
# Only ever called for a URL on the endpoint's origin; the header comes on stdin, not in argv.
with_token() {
  if [ -n "$token" ]; then
    printf 'Authorization: Bearer %s\n' "$token" | web --header @- "$@"
  else
    web "$@"
  fi
}
size_of() { if [ -f "$1" ]; then wc -c < "$1" | tr -d ' '; else echo 0; fi; }
# The whole file's size as the last response states it (Content-Range total, or a 200's length).
full_size() {
  tr -d '\r' < "$headers" | awk '
    /^HTTP\// { total = ""; len = ""; status = $2 }
    tolower($1) == "content-range:" { n = split($3, part, "/"); total = part[n] }
    tolower($1) == "content-length:" { len = $2 }
    END { if (total != "" && total != "*") print total; else if (status == 200) print len }'
}
# Cut the .part back to $1 bytes: a redirect's body must never join the file.
restore() {
  if [ "$1" -eq 0 ]; then rm -f "$part"; else dd if=/dev/null of="$part" bs=1 seek="$1" 2>/dev/null; fi
}
# One try at $1 (path in the repository) into $part: 0 done, 1 try again, 2 trying again cannot help.
attempt() {
  url="$base/$repo/resolve/$revision/$1"
  hops=0
  kind=ask  # on the endpoint: ask first (HEAD), then download what it serves itself (GET)
  while :; do
    if [ "$hops" -gt 10 ]; then echo "$1: too many redirects" >&2; return 2; fi
    have=$(size_of "$part")
    if [ "$(origin "$url")" != "$home" ]; then
      kind=download
      echo "$1: from $(origin "$url"), without the token"
      reply=$(web --fail --location --proto-redir =http,https --max-redirs 10 --speed-limit 1024 \
        --speed-time 120 --continue-at - --output "$part" --write-out '%{http_code} %{redirect_url}' \
        "$url") && rc=0 || rc=$?
    elif [ "$kind" = ask ]; then
      reply=$(with_token --head --output /dev/null --write-out '%{http_code} %{redirect_url}' "$url") \
        && rc=0 || rc=$?
    else
      reply=$(with_token --fail --speed-limit 1024 --speed-time 120 --continue-at - --output "$part" \
        --write-out '%{http_code} %{redirect_url}' "$url") && rc=0 || rc=$?
    fi
    code=${reply%% *}
    next=${reply#* }
    case "$code" in
      3??) ;;
      2??|405|501) if [ "$kind" = ask ]; then kind=download; continue; fi; break ;;
      *) break ;;
    esac
    [ "$kind" = ask ] || restore "$have"
    case "$next" in
      [Hh][Tt][Tt][Pp]://?*|[Hh][Tt][Tt][Pp][Ss]://?*) ;;
      '')
        if [ "$(origin "$url")" != "$home" ]; then
          echo "$1: a redirect from $(origin "$url") curl would not follow (http and https only, 10 at most)" >&2
          return 2
        fi
        echo "$1: HTTP $code from $(origin "$url") without a Location" >&2
        # curl names no Location for a redirect it was asked to continue: start the file over
        if [ "$kind" = download ]; then rm -f "$part"; fi
        return 1 ;;
      *) echo "$1: refusing a redirect to a non-http(s) URL" >&2; return 2 ;;
    esac
    url=$next
    hops=$((hops + 1))
    kind=ask
  done
  case "$code" in
    200|206|416) ;;
    401|403|404)
      echo "$1: HTTP $code from $(origin "$url")" >&2
      if [ "$(origin "$url")" = "$home" ]; then
        echo "$1: not in $repo at $revision, or gated: a token with access is needed" >&2
        return 2
      fi
      return 1 ;;
    *) echo "$1: HTTP ${code:-000} from $(origin "$url") (curl exit $rc)" >&2; return 1 ;;
  esac
  if [ "$rc" -eq 33 ]; then
    echo "$1: $(origin "$url") cannot continue a download: starting over" >&2
    rm -f "$part"
    return 1
  fi
  got=$(size_of "$part")
  total=$(full_size)
  if [ "$rc" -ne 0 ] && [ "$code" != 416 ]; then
    echo "$1: interrupted at $got bytes (curl exit $rc): continuing" >&2
    return 1
  fi
  if [ -z "$total" ] && [ "$code" = 416 ]; then
    echo "$1: $got bytes already and no size to check them against: starting over" >&2
    rm -f "$part"
    return 1
  fi
  if [ -n "$total" ] && [ "$got" != "$total" ]; then
    echo "$1: $got bytes where the server has $total" >&2
    if [ "$got" -gt "$total" ]; then rm -f "$part"; fi
    return 1
  fi
  return 0
}
fetch() {
  dest=$2
  part="$2.part"
  if [ -s "$dest" ]; then
    echo "present: $dest"
    return 0
  fi
  mkdir -p "${dest%/*}"
  echo "downloading $repo@$revision $1 to $dest"
  tries=1
  while :; do
    attempt "$1" && break || status=$?
    if [ "$status" -ne 1 ] || [ "$tries" -ge 5 ]; then fail "giving up on $1"; fi
    sleep "$tries"
    tries=$((tries + 1))
  done
  mv "$part" "$dest"
  ls -l "$dest"
}
if [ -n "$token" ]; then echo "the token goes to $home only"; fi
count=0
while read -r remote dest repo revision extra <&3; do
  [ -n "$remote" ] || continue
  case "$remote" in
    /*|../*|*/../*|*/..|..|*[!A-Za-z0-9._/-]*) fail "not a path in the repository: $remote" ;;
  esac
  case "$dest" in
    */../*|*/..|*[!A-Za-z0-9._/-]*) fail "not a local path: $dest" ;;
    /?*) ;;
    *) fail "not an absolute local path: $dest" ;;
  esac
  [ -z "$extra" ] || fail "MODEL_FILES: more than four words on the line of $remote"
  if [ -n "$repo" ] && [ -z "$revision" ]; then fail "MODEL_FILES: $remote names a repository without its revision"; fi
  repo=${repo:-$MODEL_REPO}
  revision=${revision:-$MODEL_REVISION}
  check_repo "$repo"
  check_revision "$revision"
  fetch "$remote" "$dest"
  count=$((count + 1))
done 3<<EOF
$MODEL_FILES
EOF
[ "$count" -gt 0 ] || fail "MODEL_FILES names no file"
