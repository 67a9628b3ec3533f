"""Reading an engine's log: line analysis, stages, the first error, the verdict, the advice."""
