"""llama.cpp, llama-cpp-python and Ollama."""
