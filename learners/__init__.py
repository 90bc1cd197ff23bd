"""Learners: train a small policy language model from trajectories read out of the Delta tables.

The numerical core lives in ``tokenizer`` (characters <-> ids), ``config`` (model sizes),
``torch_model`` / ``jax_model`` (the same decoder-only transformer in PyTorch and in pure JAX),
``losses_torch`` / ``losses_jax`` (group-relative advantages and the clipped, importance-weighted
policy-gradient loss) and ``hf_model`` (Hugging Face causal LMs loaded from a local path).
"""

__all__: list[str] = []
