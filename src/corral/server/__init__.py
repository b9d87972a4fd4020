"""The server process: the job service (state, scheduling loop, executor) and its start-up."""
