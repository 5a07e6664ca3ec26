from spanledger.chains import *
from spanledger.chains import __all__ as __all__
