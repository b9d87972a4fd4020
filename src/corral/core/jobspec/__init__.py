"""What a job is: its spec (checked from any request), states, arrays, dependencies, steps, paths, timeline."""
