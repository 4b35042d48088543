"""The library's version: a leaf module, so a module that records it (a run card) need not import the package's face."""
__version__ = "0.1.0"
