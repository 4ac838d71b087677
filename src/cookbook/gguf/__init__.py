"""GGUF: a bounded, validating reader and a writer (our own code; gguf-py is only a test oracle).

Start with `read_gguf(path)` (-> GGUFFile) and `GGUFError` (every problem with a file).
"""

from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import GGMLType, ValueType
from cookbook.gguf.reader import Field, GGUFFile, Limits, TensorInfo, read_gguf

__all__ = ["GGUFError", "GGMLType", "ValueType", "Field", "GGUFFile", "Limits", "TensorInfo", "read_gguf"]
