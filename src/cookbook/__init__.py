"""The cookbook: declarative recipes for serving large MoE models with vLLM."""

__version__ = "0.1.0"
