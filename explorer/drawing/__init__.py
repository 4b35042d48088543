"""A drawing or an upload to a 28x28 MNIST-style digit, ink statistics, the example digits (no Streamlit)."""
