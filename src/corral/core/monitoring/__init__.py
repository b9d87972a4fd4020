"""What watching jobs decides: alerts, GPU health, use outside the queue, samples, findings, advice."""
