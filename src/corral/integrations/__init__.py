"""corral for training frameworks; each module imports its framework only when imported itself.

    from corral.integrations.lightning import CorralLogger       # PyTorch Lightning
    from corral.integrations.huggingface import CorralCallback   # transformers.Trainer
"""
