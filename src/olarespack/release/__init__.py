"""Releases: SemVer bumps, in-place spec edits, rendered diffs against a git base, the version gate."""
