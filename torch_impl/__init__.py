"""PyTorch implementations: one model definition and one training loop shared by DP and DDP."""
