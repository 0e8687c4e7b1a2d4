"""Environment variables that make a process load code, or change its interpreter or its dynamic loader, each with
the documentation that says so. A chart may set them on its own box (an LD_PRELOAD of jemalloc is common), so
lint only warns; `olarespack smoke` and the sweep boot a stranger's chart on this machine and never pass them.
Also what names a place on this machine: names whose words say file, folder or path, and values that are paths."""

from __future__ import annotations

import re
from typing import NamedTuple


class EnvRule(NamedTuple):
    name: str  # an exact name, or a prefix ending in "*"
    why: str
    source: str

    def matches(self, name: str) -> bool:
        return name.startswith(self.name[:-1]) if self.name.endswith("*") else name == self.name


_LDSO = "ld.so(8), ENVIRONMENT"
_GLIBC = "glibc sysdeps/generic/unsecvars.h (UNSECURE_ENVVARS: what the loader strips from set-user-ID programs)"
_PYTHON = "Python docs, Command line and environment, Environment variables"
_BASH = "bash(1), INVOCATION and Shell Variables"

CODE_ENV: tuple[EnvRule, ...] = (
    EnvRule(
        "LD_*",
        "the dynamic loader's settings: LD_PRELOAD and LD_AUDIT load a library into the process, "
        "LD_LIBRARY_PATH chooses which libraries load, LD_DEBUG_OUTPUT writes files",
        _LDSO,
    ),
    *(
        EnvRule(
            name,
            "read by glibc or its loader to load modules or files (the loader strips it from programs "
            "it does not trust)",
            _GLIBC,
        )
        for name in (
            "GCONV_PATH",
            "GETCONF_DIR",
            "GLIBC_TUNABLES",
            "HOSTALIASES",
            "LOCALDOMAIN",
            "LOCPATH",
            "MALLOC_TRACE",
            "NIS_PATH",
            "NLSPATH",
            "RESOLV_HOST_CONF",
            "RES_OPTIONS",
            "TMPDIR",
            "TZDIR",
        )
    ),
    EnvRule(
        "PYTHON*",
        "changes the Python interpreter: PYTHONPATH and PYTHONHOME choose what imports, "
        "PYTHONWARNINGS imports the modules its filters name, PYTHONSTARTUP and PYTHONBREAKPOINT run code",
        _PYTHON,
    ),
    EnvRule(
        "BROWSER",
        "commands Python's webbrowser module runs (any module that opens a page runs them)",
        "Python docs, webbrowser",
    ),
    EnvRule(
        "PATH",
        "chooses which program every subprocess runs (compilers, ldconfig, nvidia-smi)",
        "POSIX exec (execvp searches PATH)",
    ),
    EnvRule("BASH_ENV", "a file bash runs before any non-interactive script", _BASH),
    EnvRule("ENV", "a file sh runs at start", _BASH),
    EnvRule("BASH_FUNC_*", "a function bash imports and runs in place of a command", _BASH),
    EnvRule("SHELLOPTS", "options every bash started from the process takes", _BASH),
    EnvRule("BASHOPTS", "options every bash started from the process takes", _BASH),
    EnvRule("PS4", "expanded, command substitutions included, by every traced shell", _BASH),
    EnvRule("CC", "the C compiler Triton runs to build its launchers", "triton runtime/build.py"),
    EnvRule("CXX", "the C++ compiler torch's inductor runs", "torch _inductor/cpp_builder.py"),
    EnvRule("VLLM_PLUGINS", "which installed plugins vLLM loads and runs at start", "vLLM docs, Plugin System"),
    EnvRule(
        "VLLM_LOGGING_CONFIG_PATH",
        "a logging configuration vLLM passes to logging.config.dictConfig, "
        "whose '()' keys call any importable function",
        "vLLM docs, Logging Configuration; Python docs, logging.config, User-defined objects",
    ),
    EnvRule("GGML_BACKEND_PATH", "a backend library ggml loads at start", "llama.cpp ggml/src/ggml-backend-reg.cpp"),
)

# words of an env name that say it names a place (TRITON_CACHE_DIR, HF_TOKEN_PATH, XDG_CACHE_HOME, LLAMA_CACHE)
PLACE_WORDS = frozenset({"PATH", "PATHS", "DIR", "DIRS", "FILE", "FILES", "FOLDER", "ROOT", "HOME"})


def code_env(name: str) -> EnvRule | None:
    """The rule an env name falls under when it loads code or changes the interpreter or the loader."""
    return next((rule for rule in CODE_ENV if rule.matches(name)), None)


def names_a_place(name: str) -> bool:
    """Whether an env name says its value is a file, a folder or a path (a cache's place included)."""
    words = name.upper().split("_")
    return bool(PLACE_WORDS & set(words)) or words[-1] == "CACHE"


# a colon separates a list (PATH-style) but not a URL's scheme from its address
_SEPARATORS = re.compile(r"[\s,;=]+|:(?!//)")


def path_like(token: str) -> bool:
    """Whether a word reads as a path of this machine: absolute, from a home (~), or climbing (..)."""
    token = token.strip().strip("'\"")
    if token.startswith(("/", "~", "\\")) or token.lower().startswith("file:"):
        return True
    return ".." in re.split(r"[/\\]", token)


def path_words(value: str) -> list[str]:
    """The words of a value that read as paths (a list `a:b`, pairs `name=path`, a line of words)."""
    words = [word for word in [value, *_SEPARATORS.split(value)] if word and path_like(word)]
    return list(dict.fromkeys(words))
