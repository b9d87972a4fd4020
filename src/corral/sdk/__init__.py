"""The training-side SDK: what `import corral` gives a training script (`corral.init`, `corral.Run`).

    run.py          Run and init: the public surface
    sender.py       the background thread that batches, sends and spools
    batches.py      logged dicts -> columnar metric batches
    spool.py        the on-disk spool of what could not be sent
    places.py       where a user's runs spool (a shared server's per-user directory, private fallbacks)
    sync.py         sync_spool: upload spooled runs exactly once (`corral sync`)
    checkpoints.py  atomic checkpoints, their manifest and retention
    context.py      job, rank, node and git detection
    files.py        durable writes and hashes
"""
