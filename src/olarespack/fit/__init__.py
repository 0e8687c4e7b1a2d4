"""Will it fit? The build's context checks over the engines' GPU memory arithmetic (which lives with each
engine: engines/<engine>/kv.py and fit.py)."""
