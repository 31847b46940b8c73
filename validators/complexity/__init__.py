"""The complexity rule set over complexity labels.

- ``complexity``: The complexity rules (``CPLX001``-``CPLX006``): one function per rule id of the complexity rule
  set.
- ``complexity_rules``: The versioned complexity rule set that complexity specs reference (``rules ...
"""
