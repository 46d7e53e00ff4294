"""Long-term memory for Funes: SQL rows with FAISS vectors. Imports nothing from funes."""
