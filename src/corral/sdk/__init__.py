"""The training-side SDK: what `import corral` gives a training script (`corral.init`, `corral.Run`).

    run.py          Run: the tracked run a script logs to
    start.py        init: start or resume a run; own_checkpoint_dir
    open_runs.py    the current run (corral.log, corral.finish) and the exit, fork and SIGTERM hooks
    run_record.py   RunRecord: who a run is (project, name, uid, the server's id ...)
    checkpoint_schedule.py  CheckpointSchedule: when checkpoint_due() says yes
    sender.py       the background thread that batches, sends and spools
    sender_thread.py  SenderThread: the sender's thread, and its flush/close handshake
    server_link.py  ServerLink: the sender's client, made on first use, dropped after a failure
    backoff.py      Backoff: when a spooling run next tries the server (1 s, 2 s, 4 s ...)
    batches.py      logged dicts -> columnar metric batches
    posting.py      post_record, upload: how records go to the server, live or from the spool
    spool.py        the on-disk spool of what could not be sent
    places.py       where a user's runs spool (a shared server's per-user directory, private fallbacks)
    sync.py         sync_spool: upload spooled runs exactly once (`corral sync`)
    checkpoints.py  atomic checkpoints, their manifest and retention
    context.py      job, rank, node and git detection
    files.py        durable writes and hashes
    media.py        Image, Histogram, Text and Table: media logged with run.log, uploaded as artifacts by step
"""
