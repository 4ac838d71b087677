"""Custom GPU kernels (Triton). Each subpackage is one kernel family; heavy imports stay inside."""
