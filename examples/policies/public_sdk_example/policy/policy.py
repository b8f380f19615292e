from trajrl_policy import Policy, serve
class Mine(Policy):
    async def handle(self, req, ctx):
        req["model"] = "kimi-k3" if "toolerr" in ctx.signals() else "glm-5.3-flash"
        return await ctx.upstream(req)
serve(Mine())
