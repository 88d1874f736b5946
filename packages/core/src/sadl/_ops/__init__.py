"""Core's op tables, one file per family: each op's forward, its backward and its record together.

These modules import only the records, the array helpers and each other; the engine above them
applies the records, and the built-in plugin (``sadl._builtin``) registers them.
"""
