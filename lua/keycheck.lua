-- keycheck.lua: put in front of a script by tests (lua.WithKeyCheck). The
-- script's redis.call and redis.pcall then fail a command whose key is not
-- in KEYS (docs/SCRIPTS.md): Redis itself cannot tell within one slot.
local redis = (function(real)
  local declared = {}
  for _, key in ipairs(KEYS) do
    declared[key] = true
  end
  local keyless = {TIME = true, PUBLISH = true}
  local allKeys = {DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true}
  -- refusal returns the error of a command with a key not in KEYS, or nil.
  local function refusal(command, ...)
    local name = string.upper(command)
    if keyless[name] then
      return nil
    end
    local args = {...}
    for i = 1, (allKeys[name] and #args or 1) do
      if not declared[args[i]] then
        return {err = 'ERR key check: ' .. name .. ' ' .. tostring(args[i]) .. ' is not in KEYS'}
      end
    end
    return nil
  end
  return setmetatable({
    raw = real, -- unchecked, for a test's own reads such as a fixed clock
    call = function(command, ...)
      local refused = refusal(command, ...)
      if refused then
        error(refused)
      end
      return real.call(command, ...)
    end,
    pcall = function(command, ...)
      return refusal(command, ...) or real.pcall(command, ...)
    end,
  }, {__index = real})
end)(redis)
