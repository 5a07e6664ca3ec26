from spanledger.chains.gates import *
from spanledger.chains.gates import __all__ as __all__
