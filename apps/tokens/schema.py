"""How the schema describes the token header: where tokens come from and what a refusal looks like."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.tokens.authentication.ApiTokenAuthentication"
    name = "tokenAuth"
    priority = 1  # over drf-spectacular's own scheme for TokenAuthentication, which this class extends

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": (
                "`Authorization: Token <secret>`. Create a token on the portal's *API tokens* page (/tokens/), "
                "with a name and an expiry; its secret is shown once. An expired, revoked or unknown token is "
                "answered 401 with a `detail` saying which."
            ),
        }
