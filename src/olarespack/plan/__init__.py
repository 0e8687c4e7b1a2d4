"""The memory plan: several apps on one box, each in the GPU share Olares books for it (shares.py), read
from app specs or a box file (box.py)."""
