"""Memory as measured: NVML and host sampling, peak-keeping history, the readings of a curve."""
