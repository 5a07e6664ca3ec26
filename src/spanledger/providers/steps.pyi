from spanledger.chains.steps import *
from spanledger.chains.steps import __all__ as __all__
