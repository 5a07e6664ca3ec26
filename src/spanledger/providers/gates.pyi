from spanledger.chains.gates import BUDGET_SPENT as BUDGET_SPENT
from spanledger.chains.gates import request_spend as request_spend
from spanledger.chains.gates import spend_below as spend_below
from spanledger.chains.gates import when as when
