import sys
from pathlib import Path

# The PyTorch reference model (torch_gpt.py) sits next to the tests.
sys.path.insert(0, str(Path(__file__).parent))
