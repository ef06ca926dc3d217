"""d2lmini: the helper package of the attention chapter.

Import the module you need, for example ``from d2lmini import attention``.
The layers (``attention``) know nothing of data, training or plotting.
"""

__version__ = "0.1.0"
