"""Model clients (``clients``: local checkpoints, OpenAI-compatible endpoints, scripted policies),
local Hugging Face models as policies (``hf``) and tiny hub-free models (``tiny``). These import
torch and transformers only when a local model is in play; the core never imports them."""
