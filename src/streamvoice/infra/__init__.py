"""Cloud deployment (AWS CDK stacks and the speech-infra / agent-infra CLIs).

Stands apart from the runtime: nothing in the server, client or agent imports this package.
"""
