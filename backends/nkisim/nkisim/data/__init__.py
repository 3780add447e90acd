"""The data model: memories, storages, tensors (views) and index expressions, NKI dtypes
and their numpy storage, reinterpreting views, and the numeric definitions of operators."""
